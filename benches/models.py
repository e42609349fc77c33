"""Real architectures for the model benches, each written twice: from
``yscv.nn`` layers (channel-last) and as its PyTorch twin (NCHW), with the
same module paths so that the torch model's ``state_dict()`` loads into the
yscv one with ``load_state_dict(sd, layout="torch")``.

* ResNet-18 as torchvision builds it (BasicBlock, [2, 2, 2, 2], 7x7 stem,
  3x3 max pool, global average pool, a 1000-way head).
* MobileNetV3-small as torchvision builds it (its bneck table, hardswish,
  squeeze-excite with hardsigmoid, batch norm eps 0.001, a 1024-wide
  classifier), without the classifier's dropout so that both sides' first
  losses can be compared (dropout costs a mask and a multiply).
* ViT-tiny: patch 8, d=192, 3 heads, 4 pre-norm encoder layers with an MLP
  of 768 and GELU, a class token and learned positions, as torchvision's
  VisionTransformer (dropout 0).

``resnet18()`` etc. return ``(yscv_model, torch_model)``; the torch side is
built only when ``torch`` is given.
"""
from __future__ import annotations

import numpy as np

import yscv
from yscv import nn

# ------------------------------------------------------------------ yscv side


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, g, x):
        h = g.relu(self.bn1(g, self.conv1(g, x)))
        h = self.bn2(g, self.conv2(g, h))
        skip = x if self.downsample is None else self.downsample(g, x)
        return g.relu(h + skip)


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        chans = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
        for i, (cin, cout, s) in enumerate(chans, 1):
            setattr(self, f"layer{i}", nn.Sequential(BasicBlock(cin, cout, s),
                                                     BasicBlock(cout, cout, 1)))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, g, x):
        h = self.maxpool(g, g.relu(self.bn1(g, self.conv1(g, x))))
        for i in range(1, 5):
            h = getattr(self, f"layer{i}")(g, h)
        return self.fc(g, g.global_avg_pool2d(h))


def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


#: torchvision's MobileNetV3-small bneck table: (in, kernel, expanded, out, SE, activation, stride)
MOBILENET_V3_SMALL = [
    (16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2),
    (24, 3, 88, 24, False, "RE", 1), (24, 5, 96, 40, True, "HS", 2),
    (40, 5, 240, 40, True, "HS", 1), (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 120, 48, True, "HS", 1), (48, 5, 144, 48, True, "HS", 1),
    (48, 5, 288, 96, True, "HS", 2), (96, 5, 576, 96, True, "HS", 1),
    (96, 5, 576, 96, True, "HS", 1),
]


def _act(kind):
    return nn.ReLU() if kind == "RE" else nn.Hardswish()


class ConvBNAct(nn.Sequential):
    def __init__(self, cin, cout, k, stride=1, groups=1, act="HS"):
        layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=(k - 1) // 2, groups=groups,
                            bias=False), nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
        if act is not None:
            layers.append(_act(act))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, c, squeeze):
        super().__init__()
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)

    def forward(self, g, x):
        n, c = x.shape[0], x.shape[-1]
        s = g.reshape(g.global_avg_pool2d(x), (n, 1, 1, c))
        s = g.hardsigmoid(self.fc2(g, g.relu(self.fc1(g, s))))
        return x * s


class InvertedResidual(nn.Module):
    def __init__(self, cin, k, exp, cout, se, act, stride):
        super().__init__()
        layers = []
        if exp != cin:
            layers.append(ConvBNAct(cin, exp, 1, act=act))
        layers.append(ConvBNAct(exp, exp, k, stride=stride, groups=exp, act=act))
        if se:
            layers.append(SqueezeExcitation(exp, _make_divisible(exp // 4, 8)))
        layers.append(ConvBNAct(exp, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, g, x):
        y = self.block(g, x)
        return y + x if self.use_res else y


class MobileNetV3Small(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        layers = [ConvBNAct(3, 16, 3, stride=2)]
        layers += [InvertedResidual(*row) for row in MOBILENET_V3_SMALL]
        layers.append(ConvBNAct(96, 576, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(),
                                        nn.Linear(1024, num_classes))

    def forward(self, g, x):
        return self.classifier(g, g.global_avg_pool2d(self.features(g, x)))


class ViT(nn.Module):
    def __init__(self, image=64, patch=8, d=192, heads=3, layers=4, mlp=768, num_classes=1000):
        super().__init__()
        self.patch, self.d = patch, d
        self.conv_proj = nn.Conv2d(3, d, patch, stride=patch)
        seq = (image // patch) ** 2 + 1
        self.class_token = nn.Parameter(np.zeros((1, 1, d), np.float32))
        self.pos_embedding = nn.Parameter(
            (0.02 * np.random.default_rng(0).standard_normal((1, seq, d))).astype(np.float32))
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d, heads, mlp, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(layers)])
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, num_classes)

    def forward(self, g, x):
        n = x.shape[0]
        h = self.conv_proj(g, x)                                  # [N, H/p, W/p, d]
        h = g.reshape(h, (n, -1, self.d))
        cls = g.expand(g.param(self.class_token), (n, 1, self.d))
        h = g.cat([cls, h], 1) + g.param(self.pos_embedding)
        for layer in self.layers:
            h = layer(g, h)
        return self.head(g, self.ln(g, g.select(h, 1, 0)))


# ------------------------------------------------------------------ torch twins


def torch_classes(torch):
    tnn = torch.nn

    class TBasicBlock(tnn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = tnn.BatchNorm2d(cout)
            self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = tnn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False),
                                                 tnn.BatchNorm2d(cout))

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            return torch.relu(h + (x if self.downsample is None else self.downsample(x)))

    class TResNet18(tnn.Module):
        def __init__(self, num_classes=1000):
            super().__init__()
            self.conv1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = tnn.BatchNorm2d(64)
            self.maxpool = tnn.MaxPool2d(3, 2, 1)
            chans = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
            for i, (cin, cout, s) in enumerate(chans, 1):
                setattr(self, f"layer{i}", tnn.Sequential(TBasicBlock(cin, cout, s),
                                                          TBasicBlock(cout, cout, 1)))
            self.fc = tnn.Linear(512, num_classes)

        def forward(self, x):
            h = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
            h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
            return self.fc(h.mean((2, 3)))

    def tact(kind):
        return tnn.ReLU() if kind == "RE" else tnn.Hardswish()

    class TConvBNAct(tnn.Sequential):
        def __init__(self, cin, cout, k, stride=1, groups=1, act="HS"):
            layers = [tnn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                      tnn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
            if act is not None:
                layers.append(tact(act))
            super().__init__(*layers)

    class TSqueezeExcitation(tnn.Module):
        def __init__(self, c, squeeze):
            super().__init__()
            self.fc1 = tnn.Conv2d(c, squeeze, 1)
            self.fc2 = tnn.Conv2d(squeeze, c, 1)

        def forward(self, x):
            s = x.mean((2, 3), keepdim=True)
            return x * torch.nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))

    class TInvertedResidual(tnn.Module):
        def __init__(self, cin, k, exp, cout, se, act, stride):
            super().__init__()
            layers = []
            if exp != cin:
                layers.append(TConvBNAct(cin, exp, 1, act=act))
            layers.append(TConvBNAct(exp, exp, k, stride=stride, groups=exp, act=act))
            if se:
                layers.append(TSqueezeExcitation(exp, _make_divisible(exp // 4, 8)))
            layers.append(TConvBNAct(exp, cout, 1, act=None))
            self.block = tnn.Sequential(*layers)
            self.use_res = stride == 1 and cin == cout

        def forward(self, x):
            y = self.block(x)
            return y + x if self.use_res else y

    class TMobileNetV3Small(tnn.Module):
        def __init__(self, num_classes=1000):
            super().__init__()
            layers = [TConvBNAct(3, 16, 3, stride=2)]
            layers += [TInvertedResidual(*row) for row in MOBILENET_V3_SMALL]
            layers.append(TConvBNAct(96, 576, 1))
            self.features = tnn.Sequential(*layers)
            self.classifier = tnn.Sequential(tnn.Linear(576, 1024), tnn.Hardswish(),
                                             tnn.Linear(1024, num_classes))

        def forward(self, x):
            return self.classifier(self.features(x).mean((2, 3)))

    class TViT(tnn.Module):
        def __init__(self, image=64, patch=8, d=192, heads=3, layers=4, mlp=768,
                     num_classes=1000):
            super().__init__()
            self.conv_proj = tnn.Conv2d(3, d, patch, patch)
            seq = (image // patch) ** 2 + 1
            self.class_token = tnn.Parameter(torch.zeros(1, 1, d))
            self.pos_embedding = tnn.Parameter(torch.zeros(1, seq, d))
            self.layers = tnn.ModuleList([
                tnn.TransformerEncoderLayer(d, heads, mlp, dropout=0.0, activation="gelu",
                                            batch_first=True, norm_first=True)
                for _ in range(layers)])
            self.ln = tnn.LayerNorm(d, eps=1e-6)
            self.head = tnn.Linear(d, num_classes)

        def forward(self, x):
            n = x.shape[0]
            h = self.conv_proj(x).flatten(2).transpose(1, 2)
            h = torch.cat([self.class_token.expand(n, -1, -1), h], 1) + self.pos_embedding
            for layer in self.layers:
                h = layer(h)
            return self.head(self.ln(h[:, 0]))

    return TResNet18, TMobileNetV3Small, TViT


def build(name: str, torch=None, seed: int = 0):
    """``(yscv model, torch model or None)`` of ``name`` ("resnet18",
    "mobilenet_v3_small", "vit_tiny") with the same weights: the torch
    model's initial weights loaded into the yscv one (layout="torch"),
    or yscv's own initialisation when ``torch`` is None."""
    yscv.manual_seed(seed)
    ours = {"resnet18": ResNet18, "mobilenet_v3_small": MobileNetV3Small, "vit_tiny": ViT}[name]()
    if torch is None:
        return ours, None
    torch.manual_seed(seed)
    classes = dict(zip(("resnet18", "mobilenet_v3_small", "vit_tiny"), torch_classes(torch)))
    theirs = classes[name]()
    if name == "vit_tiny":
        with torch.no_grad():
            theirs.pos_embedding.normal_(std=0.02)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()},
                         layout="torch")
    return ours, theirs
